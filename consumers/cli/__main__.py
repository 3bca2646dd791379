"""``python -m consumers.cli``: the ``streamtopics`` command."""

from . import main

main()
