"""One iteration: schedule, workspace, proposal checks, evaluation, recording, and their recovery and publishing."""
