"""What every output of `empirical` shares: files written atomically (`files`), figures
(`figures`, `style`, `phase_marks`), markdown tables (`tables`) and the statistics every
reported number carries (`stats`, `population_stats`). Imports nothing of the layers above."""
