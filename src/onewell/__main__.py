"""`python -m onewell` is the `onewell` command."""
from onewell.cli import main

raise SystemExit(main())
