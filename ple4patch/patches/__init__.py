"""Data only: the manifest pins (*.json) shipped with ple4patch."""
