"""The sandbox: every evaluation and agent command runs confined (bubblewrap) or at least limited."""
