"""The model: the GPT with its number heads (gpt.py), its shape (gpt_config.py, read without torch),
the fused element-wise layers and loss (fused.py), FlexAttention (flex.py), the C kernels and the
workbench's own matrix products (cpu_kernels.c, cpu_kernels.py, gemm.py) and the numerics mode
they compute in (numerics.py). Nothing is imported here: `import workbench` reads numerics.py
before torch, and a command's flags read gpt_config.py without it."""
