#!/usr/bin/env python3
"""ILSVRC 2012's devkit in miniature, written the way the real one is read.

  devkit-fixture.py OUT   write OUT/ILSVRC2012_devkit_t12/data/meta.mat
                          (compressed, as MATLAB saved the devkit's) and
                          ILSVRC2012_validation_ground_truth.txt, and
                          OUT/meta-uncompressed.mat (the same variable,
                          uncompressed)

core/tests/fixtures/devkit was made by this script. meta.mat holds one
variable, `synsets`, an N x 1 struct array with the devkit's fields
(ILSVRC2012_ID, WNID, words, gloss, num_children, children,
wordnet_height, num_train_images). As in the real devkit, the leaf classes
come first with ILSVRC2012_IDs 1..K in an order that is not the wnids'
sorted order, followed by the synsets above them. The ground truth has one
ILSVRC2012_ID per line, line n for ILSVRC2012_val_<n, 8 digits>.JPEG: here
4 images of each class, the classes in sorted wnid order.

Needs `pip install scipy numpy`.
"""

import pathlib
import sys

import numpy as np
import scipy.io

# (ILSVRC2012_ID, wnid, words): leaves 1..3, not in sorted wnid order, then a parent.
SYNSETS = [
    (1, "n01484850", "great white shark, white shark, man-eater"),
    (2, "n01440764", "tench, Tinca tinca"),
    (3, "n01443537", "goldfish, Carassius auratus"),
    (4, "n02512053", "fish"),
]
IMAGES_PER_CLASS = 4


def main(out):
    out = pathlib.Path(out)
    data = out / "ILSVRC2012_devkit_t12" / "data"
    data.mkdir(parents=True, exist_ok=True)
    dtype = [
        ("ILSVRC2012_ID", object),
        ("WNID", object),
        ("words", object),
        ("gloss", object),
        ("num_children", object),
        ("children", object),
        ("wordnet_height", object),
        ("num_train_images", object),
    ]
    synsets = np.zeros((len(SYNSETS), 1), dtype=dtype)
    leaves = [s for s in SYNSETS if s[0] <= 3]
    for row, (sid, wnid, words) in enumerate(SYNSETS):
        leaf = sid <= len(leaves)
        children = np.zeros((1, 0)) if leaf else np.array([[float(s[0]) for s in leaves]])
        synsets[row, 0] = (
            np.array([[float(sid)]]),
            wnid,
            words,
            "a fixture synset",
            np.array([[float(children.shape[1])]]),
            children,
            np.array([[0.0 if leaf else 1.0]]),
            np.array([[1300.0 if leaf else 0.0]]),
        )
    scipy.io.savemat(data / "meta.mat", {"synsets": synsets}, do_compression=True)
    scipy.io.savemat(out / "meta-uncompressed.mat", {"synsets": synsets}, do_compression=False)
    id_of = {wnid: sid for sid, wnid, _ in leaves}
    lines = [str(id_of[w]) for w in sorted(id_of) for _ in range(IMAGES_PER_CLASS)]
    (data / "ILSVRC2012_validation_ground_truth.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
