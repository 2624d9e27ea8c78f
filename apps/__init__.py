"""Applications built on dsh-harness."""
