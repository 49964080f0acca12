"""Write the Fashion-MNIST attributes sample in NIH ChestX-ray14's layout.

Each image gets the attribute labels of its class (a pullover is an upper
garment with sleeves that keeps one warm; a bag has none, "No Finding"), so
one image has zero to four labels. The first 500 training and 100 test
images of the Fashion-MNIST files in ../fashion-mnist become
images/<patient>_000.png, listed in Data_Entry_2017.csv with ChestX-ray14's
columns, and split by train_val_list.txt / test_list.txt.

    python3 configs/data/fashion-attributes/make.py
"""

import gzip
import pathlib
import struct

from PIL import Image

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE.parent / "fashion-mnist"
ATTRIBUTES = [
    "Upper",  # T-shirt/top
    "Lower",  # Trouser
    "Upper|Sleeves|Warm",  # Pullover
    "Upper|Lower",  # Dress
    "Upper|Sleeves|Warm|Outer",  # Coat
    "Footwear",  # Sandal
    "Upper|Sleeves",  # Shirt
    "Footwear|Laced",  # Sneaker
    "No Finding",  # Bag
    "Footwear|Warm",  # Ankle boot
]
HEADER = (
    "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,"
    "View Position,OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],"
)


def idx(path):
    data = gzip.open(path).read()
    dims = data[3]
    shape = struct.unpack(">" + "I" * dims, data[4 : 4 + 4 * dims])
    return shape, data[4 + 4 * dims :]


def split(prefix, count):
    (n, h, w), pixels = idx(SOURCE / f"{prefix}-images-idx3-ubyte.gz")
    _, labels = idx(SOURCE / f"{prefix}-labels-idx1-ubyte.gz")
    for k in range(min(count, n)):
        yield Image.frombytes("L", (w, h), pixels[k * h * w : (k + 1) * h * w]), labels[k]


def main():
    images = HERE / "images"
    images.mkdir(exist_ok=True)
    rows, lists = [HEADER], {"train_val_list.txt": [], "test_list.txt": []}
    patient = 0
    for prefix, count, listing in [("train", 500, "train_val_list.txt"), ("t10k", 100, "test_list.txt")]:
        for image, label in split(prefix, count):
            patient += 1
            name = f"{patient:08d}_000.png"
            image.save(images / name, optimize=True)
            rows.append(f"{name},{ATTRIBUTES[label]},0,{patient},0,-,PA,28,28,1,1,")
            lists[listing].append(name)
    (HERE / "Data_Entry_2017.csv").write_text("\n".join(rows) + "\n")
    for listing, names in lists.items():
        (HERE / listing).write_text("\n".join(names) + "\n")


if __name__ == "__main__":
    main()
