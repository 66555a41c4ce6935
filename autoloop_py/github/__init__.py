"""GitHub: the API client, what autoloop writes there (status comment, PR), CI runs, issue programs, the scheduler."""
