"""Dictionaries (sparse autoencoders) on a model's values, read over the image.

* `Dictionary` (`dictionary`): load one from plain tensors or an sae-lens ``SAE``,
  `attach` it to a standard value, and inside a trace `encode`, `decode`, take the
  `error` and `edit` features at an image's tokens (`rows`);
* `train` (`training`): train one on a store `vlreg.collect` wrote, with sae-lens' trainer
  (``pip install 'vlreg[train]'``); the result is an sae-lens SAE folder `Dictionary.load` reads;
* `feature_maps`, `selectivity` (`image`): a feature's map on each image's token grid,
  the top features of a region or a token, the features selective for image tokens;
  `vlreg.pictures.feature_map` draws a map over the image.
"""

from .dictionary import SITES, Dictionary
from .image import FeatureMaps, Selectivity, feature_maps, selectivity
from .training import Trained, train

__all__ = ["Dictionary", "SITES", "FeatureMaps", "feature_maps", "Selectivity", "selectivity", "Trained", "train"]
