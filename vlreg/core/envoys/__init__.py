"""The standard envoy classes a family maps its modules onto: `Standard` and the one walk
over the standard tree (`standard`), the text blocks (`text`, `mixers`, `experts`,
`linear`, `mamba`, `cross`, `seq2seq`, `streams`), the tower (`vision`, `packed`, `calls`) and the
readout. They serve values (`vlreg.core.serving`) and ask the model for everything else."""
