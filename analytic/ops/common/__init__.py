"""Helpers shared by every op family (kernel sequences described tensor by tensor)."""
