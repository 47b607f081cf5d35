"""NicePIM software: the workloads, the Data-Scheduler and the PIM-Mapper (Sec. VI-VII)."""
