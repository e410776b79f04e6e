"""The GPU check (``bench/gpu/run.sh``) and the measurements only it runs."""
