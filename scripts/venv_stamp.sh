# Sourced by demo.sh and install.sh (from the checkout's root): whether .venv already holds what
# pyproject.toml asks for. After a successful install, mark_venv_current writes .venv/.installed:
# a digest of pyproject.toml and of the checkout's path (the editable install points there).
# While it matches, demo.sh skips pip: pip takes 6-12 s even with nothing to do, and without a
# reachable package index it fails (its isolated build of the editable wheel must download
# setuptools) although the virtualenv is complete. Changing pyproject.toml, moving the checkout or
# deleting .venv makes the next run install again.

venv_digest() {
  .venv/bin/python -c 'import hashlib, os, sys
sys.stdout.write(hashlib.sha256(open("pyproject.toml", "rb").read() + os.getcwd().encode()).hexdigest())'
}

venv_is_current() {
  [ -x .venv/bin/streamtopics ] && [ -f .venv/.installed ] && [ "$(cat .venv/.installed)" = "$(venv_digest)" ]
}

mark_venv_current() {
  venv_digest > .venv/.installed
}
