"""Ours: property-based exploration (Hypothesis) beyond the matrices."""
