"""Many runs and the claims they support: sweeps and grids of batched members with their
executors (`sweep`), populations of seeds and how often each paper check holds (`population`),
the paper checks one run can make (`paper_checks`), and the main job (`reproduce`: its list of
stages; `reproduce_options`: its command line; `scheduling`: its processes;
`reproduce_report`: report.md). See docs/sweep.md, docs/populations.md, docs/training.md
("The main job")."""

__all__ = ["paper_checks", "population", "reproduce", "reproduce_options", "reproduce_report",
           "scheduling", "sweep"]  # fmt: skip
