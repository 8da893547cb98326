"""The catalogue of known datasets: file names, sizes, checksums, official addresses, citations.

The checksums are those of the copies the project tests against (see ``SHA256SUMS`` next to the
data). Text files are stored with ``\\n`` line endings; :func:`zoframe_datasets.fetch` normalises a
download the same way before it verifies the checksum.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: The LIBSVM binary-classification data page (Chang & Lin).
LIBSVM_BINARY_URL = "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/"

_LIBSVM_CITATION = (
    "C.-C. Chang and C.-J. Lin, LIBSVM: a library for support vector machines, "
    "ACM Transactions on Intelligent Systems and Technology 2(3), 2011"
)


@dataclass(frozen=True)
class DatasetInfo:
    """What zoframe knows about one dataset.

    ``file`` is the name of the file in the data directory; ``remote`` is the name of the file at
    ``url`` (it may be compressed, e.g. ``colon-cancer.bz2``, or in another format that
    :func:`zoframe_datasets.fetch` converts, e.g. ``20news_w100.mat``). ``sha256`` is the checksum of
    ``file`` as stored (``None`` when no checksummed copy is known); ``remote_sha256`` that of the
    downloaded (decompressed) remote file where it differs from ``file``.
    """

    name: str
    file: str
    n_features: int
    n_samples: int | None
    labels: tuple[float, ...]
    sha256: str | None
    url: str
    remote: str
    citation: str
    notes: str = ""
    remote_sha256: str | None = None

    @property
    def remote_is_compressed(self) -> bool:
        return self.remote.endswith((".bz2", ".gz", ".xz"))


def _libsvm(
    name: str,
    n_features: int,
    n_samples: int | None,
    labels: tuple[float, ...],
    sha256: str | None,
    citation: str,
    notes: str = "",
    remote: str | None = None,
    file: str | None = None,
) -> DatasetInfo:
    remote = remote or name
    return DatasetInfo(
        name=name,
        file=file or name,
        n_features=n_features,
        n_samples=n_samples,
        labels=labels,
        sha256=sha256,
        url=LIBSVM_BINARY_URL + remote,
        remote=remote,
        citation=f"{citation}; {_LIBSVM_CITATION}",
        notes=notes,
    )


_ADULT = (
    "R. Kohavi and B. Becker, UCI Adult data set, 1996; preprocessed by J. C. Platt, Fast training of "
    "support vector machines using sequential minimal optimization, Advances in Kernel Methods, MIT Press 1998"
)
_WEB = (
    "J. C. Platt, Fast training of support vector machines using sequential minimal optimization, "
    "Advances in Kernel Methods, MIT Press 1998"
)
_GUIDE = (
    "C.-W. Hsu, C.-C. Chang and C.-J. Lin, A practical guide to support vector classification, "
    "National Taiwan University, 2003"
)

_ENTRIES = (
    _libsvm(
        "a9a", 123, 32561, (-1.0, 1.0),
        "f5d5ffd8d865ff41328e7ee043e4b020816914ff6843ff15b98905ddbedce906", _ADULT,
    ),
    _libsvm(
        "a9a.t", 123, 16281, (-1.0, 1.0),
        "1f448a153f0320399a7e40836eb207655b0bde0f21fc941cc472193daa9f5de9", _ADULT,
        notes="test split of a9a; its largest feature index is 122, the catalogue sets 123",
    ),
    _libsvm(
        "w8a", 300, 49749, (-1.0, 1.0),
        "b464b4f6ce6a5d9e181ffc793e19a04751036273722312398ef7673705014902", _WEB,
    ),
    _libsvm(
        "svmguide3", 22, 1243, (-1.0, 1.0),
        "ada17021fdf508bcaac7b7adea825886478f915935eccb24470f22c806dc4508", _GUIDE,
        notes="line endings normalised to LF; explicit zeros kept; feature 22 is 0 in every row",
    ),
    _libsvm(
        "svmguide3.t", 22, 41, (1.0,),
        "cee704e709725edbb8d200f5973e3bae83691aea1e15dbba121d6d8629110cd5", _GUIDE,
        notes="test split of svmguide3; every label is +1",
    ),
    _libsvm(
        "mushrooms", 112, 8124, (1.0, 2.0),
        "51919a59d92e6ec922259e77afd91d9a809299613ee0da052a19abe746aa2244",
        "J. Schlimmer, UCI Mushroom data set, 1987",
        notes="labels are {1, 2}, not +-1 (use binary_labels); line endings normalised to LF",
    ),
    _libsvm(
        "colon-cancer", 2000, 62, (-1.0, 1.0),
        "e63943960d96fff9244527df533d154f556b19e008aa32f03103d9f90ea83fd0",
        "U. Alon et al., Broad patterns of gene expression revealed by clustering analysis of tumor "
        "and normal colon tissues probed by oligonucleotide arrays, PNAS 96(12), 1999",
        remote="colon-cancer.bz2",
        notes=(
            "served compressed (colon-cancer.bz2); the checksummed copy was rebuilt from a dense copy "
            "(6 significant digits) and is not confirmed byte-identical to the LIBSVM file, so a fresh "
            "download may fail the checksum: compare it yourself and pass --sha256 HASH"
        ),
    ),
    _libsvm(
        "covtype.binary", 54, 581012, (1.0, 2.0), None,
        "J. A. Blackard and D. J. Dean, UCI Covertype data set, 1998; binary version by R. Collobert, "
        "S. Bengio and Y. Bengio, 2002",
        remote="covtype.libsvm.binary.bz2", file="covtype.binary",
        notes="no checksummed copy is known: fetch prints the SHA256 of what it downloaded",
    ),
    DatasetInfo(
        name="20news_w100",
        file="20news_w100.libsvm",
        n_features=100,
        n_samples=16242,
        labels=(1.0, 2.0, 3.0, 4.0),
        sha256="58a3372e7ea2c0c8017cffc72c0183ab222d09f1ba23514a9b3fa6b8528491b9",
        url="https://cs.nyu.edu/~roweis/data/20news_w100.mat",
        remote="20news_w100.mat",
        remote_sha256="6667c5459e22eb544a854bff1443edaaea71735cf1af7b12cc5d986e74af7064",
        citation=(
            "S. Roweis, 20 Newsgroups 100-word binary occurrence data (cs.nyu.edu/~roweis/data.html), "
            "from K. Lang, NewsWeeder: learning to filter netnews, ICML 1995"
        ),
        notes=(
            "groups 1..4 (comp, rec, sci, talk); feature j = word j present; fetched as the MATLAB "
            "file and rewritten as LIBSVM text"
        ),
    ),
)

#: Known datasets by name (read-only).
DATASETS: Mapping[str, DatasetInfo] = MappingProxyType({d.name: d for d in _ENTRIES})

#: Known datasets by the name of their stored file (``20news_w100.libsvm`` -> ``20news_w100``).
BY_FILE: Mapping[str, DatasetInfo] = MappingProxyType({d.file: d for d in _ENTRIES})


def lookup(name: str) -> DatasetInfo | None:
    """The catalogue entry for a dataset name or stored file name, or ``None``."""
    return DATASETS.get(name) or BY_FILE.get(name)
