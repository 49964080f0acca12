"""Render the molecule captions sample: NCI molecules from RDKit's data
directory drawn as grey PNGs, each captioned with its InChI string, in the
shape of Kaggle BMS's train_labels.csv (image_id,InChI).

    pip install rdkit
    python3 configs/data/molecules/render.py [count]

Writes <count> (default 300) images under images/ and captions.csv beside
this script. Molecules RDKit cannot parse or give an InChI are skipped.
"""

import csv
import os
import sys

from rdkit import Chem, RDConfig, RDLogger
from rdkit.Chem import Draw

RDLogger.DisableLog("rdApp.*")

SIZE = 128


def smiles_lines():
    path = os.path.join(RDConfig.RDDataDir, "NCI", "first_5K.smi")
    with open(path) as f:
        for line in f:
            parts = line.split()
            if parts:
                yield parts[0], parts[1] if len(parts) > 1 else None


def main():
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    here = os.path.dirname(os.path.abspath(__file__))
    images = os.path.join(here, "images")
    os.makedirs(images, exist_ok=True)
    rows = []
    for smiles, nci_id in smiles_lines():
        if len(rows) == count:
            break
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            continue
        inchi = Chem.MolToInchi(mol)
        if not inchi:
            continue
        image_id = "nci%05d" % len(rows) if nci_id is None else "nci" + nci_id
        Draw.MolToImage(mol, size=(SIZE, SIZE)).convert("L").save(os.path.join(images, image_id + ".png"))
        rows.append((image_id, inchi))
    with open(os.path.join(here, "captions.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["image_id", "InChI"])
        writer.writerows(rows)
    print("wrote %d molecules to %s" % (len(rows), here))


if __name__ == "__main__":
    main()
