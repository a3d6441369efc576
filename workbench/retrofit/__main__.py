import sys

from .plan import dry_run

# --help, a bad flag and --dry-run are answered before finetune imports torch and transformers
if not dry_run(sys.argv[1:]):
    from .finetune import main

    main()
