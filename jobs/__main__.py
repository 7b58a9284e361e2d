"""``python -m jobs``: the ``neverlost`` command line."""

from jobs.cli import main

main()
