"""The paper's figures 2-8 rebuilt from its tables, the authors' released files, our task generator
and our own training results (notebook 04)."""
