"""What every output of `empirical` shares: files written atomically (`files`), figures
(`figures`, `style`, `phase_marks`), markdown tables (`tables`), the one writer of a result's
files (`writer`) and the statistics every reported number carries (`stats`,
`population_stats`). Imports nothing of the layers above."""

__all__ = ["figures", "files", "phase_marks", "population_stats", "stats", "style", "tables",
           "writer"]  # fmt: skip
