from .finetune import main

main()
