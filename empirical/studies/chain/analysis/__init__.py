"""The analyses the chain family adds: attention onto the chain's targets per layer and over
training (`attention`), activation patching of the hops (`patching`), the report `analyze`
writes (`mechanisms`), and compare-qk for chain runs against the two-hop theory
(`qk_compare`, `qk_coords`, `qk_theory`, `qk_summary`)."""

__all__ = ["attention", "mechanisms", "patching", "qk_compare", "qk_coords", "qk_summary",
           "qk_theory"]
