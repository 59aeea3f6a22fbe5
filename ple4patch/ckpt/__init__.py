"""Checkpoint inspection (``ple4patch inspect``): will a checkpoint load, and what will it pin?

Modules, each with one job, lower ones first:

- :mod:`.layout`: what the engine expects (names, dtypes, layouts, files, row geometry)
- :mod:`.problem`: one finding
- :mod:`.access`: opening a file: inside CHECKPOINT_DIR only, regular files only, never blocking
- :mod:`.jsonread`: JSON with bounded depth (strict: as the safetensors library reads it)
- :mod:`.header`: one safetensors file's header, by the safetensors library's rules
- :mod:`.config`: the PLE part of ``config.json``
- :mod:`.rows`: the rows the engine builds and their split into shards
- :mod:`.files`: the index and every weight file's header
- :mod:`.table`: one PLE table's facts; :mod:`.checks`: the checks on them;
  :mod:`.tables`: every table, checked
- :mod:`.placement`: a rank's rows between pinned host memory (the host budget) and VRAM
- :mod:`.memory`: pinned bytes per rank and host against this host's memory
- :mod:`.scan`: ``--scan``, the PLE bytes streamed
- :mod:`.venv_engine`: ``--venv``, which layouts that engine reads
- :mod:`.report`: verdict, JSON and text; :mod:`.inspect`: all of it composed, as the command

No torch, no numpy, no libcst anywhere here.
"""
