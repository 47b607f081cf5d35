"""Design-space exploration (DESCNet scratchpads; room for other explorations)."""
