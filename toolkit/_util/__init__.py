"""Internal helpers shared by every layer: hashing and seeded draws, row keys, result objects,
validation helpers, and where the shipped example data lives. Nothing here imports another
toolkit subpackage.
"""
