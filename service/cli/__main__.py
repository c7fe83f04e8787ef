"""``python -m service.cli``: the same as the ``svc`` console script."""

from service.cli.main import main

main()
