"""First-party plugins of dsh-harness."""
