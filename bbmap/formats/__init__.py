"""Format declarations in construct: each on-disk layout declared once, parse and build."""
