"""Builds: the keyed build cache (``cache``), the shared precompiled header (``pch``), the build pool (``pool``)."""
