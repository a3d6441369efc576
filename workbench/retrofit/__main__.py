import sys

from .config import command_line

command_line(sys.argv[1:])  # --help and a bad flag answered before finetune imports torch and transformers

from .finetune import main  # noqa: E402

main()
