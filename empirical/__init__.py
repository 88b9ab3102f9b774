"""The real model: task generator, hooked 2-layer transformer, training and analysis."""
