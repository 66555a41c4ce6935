from autoloop_py.strategies.backoff import backoff_wait


def test_the_wait_doubles_with_each_unusable_reply_in_a_row_and_stops_at_eight_times() -> None:
    assert [backoff_wait(n, 5) for n in range(7)] == [0, 5, 10, 20, 40, 40, 40]
    assert [backoff_wait(n, 1) for n in range(1, 6)] == [1, 2, 4, 8, 8]


def test_a_first_wait_of_zero_never_waits() -> None:
    assert {backoff_wait(n, 0) for n in range(10)} == {0}
