#!/usr/bin/env bash
# Create the Python virtual environments that write the test fixtures.
#
#   target/venv-zarr3  zarr-python 3.x: writes the Zarr v2 and v3 fixtures; tensorstore
#                      reads back what writable mounts write (scripts/check_made.py);
#                      requests and fsspec's HTTP filesystem read what `zarrfs serve`
#                      serves (scripts/check_served.py)
#   target/venv-zarr2  zarr-python 2.18.7: writes the 2020 draft-v3 layout
#   target/venv-views  the file views' readers (scripts/check_views.py): Debian's
#                      /usr/bin/python3 with its site packages (GDAL's osgeo from
#                      python3-gdal and its numpy; GDAL has no PyPI wheel), plus
#                      tifffile, SimpleITK and pynrrd from PyPI
#   target/venv-refs   kerchunk reference sets over NetCDF-4/HDF5 files
#                      (scripts/make_fixtures_refs.py): kerchunk 0.2.10 with
#                      zarr-python 3.1, netCDF4, h5py, xarray and h5netcdf for the
#                      source files and their read-back, pandas and fastparquet
#                      for Parquet references, VirtualiZarr; wheels only
#   target/venv-icechunk  Icechunk repositories (scripts/make_fixtures_icechunk.py):
#                      the icechunk package 2.3 with zarr-python 3.1, on Python 3.12;
#                      VirtualiZarr, netCDF4, h5py and xarray for a repository of
#                      virtual chunks into NetCDF-4 files
#   target/venv-geo    georeferenced arrays and their reference reads
#                      (scripts/make_fixtures_geo.py, scripts/check_geo.py): xarray,
#                      rioxarray and netCDF4 write them; rasterio's wheel bundles a
#                      recent GDAL that reads final Zarr v3 and CF grid_mapping
#   target/venv-ome    OME-Zarr images (scripts/make_fixtures_ome.py) and their OME-TIFF
#                      reads (scripts/check_ome.py): ome-zarr-py writes OME-NGFF 0.4
#                      and 0.5 from scikit-image's sample images; tifffile reads
#                      the OME-TIFF views
#   target/venv-notebook  a Jupyter kernel run by nbclient (scripts/check_notebook.py);
#                      tests/it/python_api.rs installs the zarrfs wheel into it, and
#                      checks the package's types with its mypy
#   target/venv-deploy kubernetes-validate: the manifests of deploy/kubernetes checked
#                      against Kubernetes' schemas (scripts/check_manifests.py)
#   target/wheelhouse  numpy's wheel, from which tests/it/python_api.rs makes its fresh
#                      venv of the zarrfs wheel and numpy alone, offline
#
# Idempotent: each venv is an entry of the test cache (scripts/test_cache.sh) keyed by
# its requirement list and its Python; target/NAME links to it, and pip runs only for a
# key the machine has not seen.
# Usage: bash scripts/setup_python.sh   (from anywhere; paths are repo-relative)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
target_dir="$repo_root/target"
python="${PYTHON:-python3}"

# One requirement per line; changing a line re-runs pip for that venv.
zarr3_requirements='zarr>=3.1,<4
numpy
numcodecs[crc32c]
crc32c
tensorstore
requests
fsspec
aiohttp'
zarr2_requirements='zarr==2.18.7
numpy<2
numcodecs>=0.12,<0.16
pytest'
# kerchunk 0.2.8 and later need zarr>=3.0.1 and fsspec>=2025.2.0 (0.2.7 and older need
# zarr<3); VirtualiZarr 2.x needs zarr>=3.1 and numpy>=2.1. VirtualiZarr's [hdf] extra
# (hdf5plugin, imagecodecs) is left out: its HDF parser reads zlib and shuffle without it.
refs_requirements='--only-binary=:all:
kerchunk==0.2.10
zarr>=3.1,<3.2
numcodecs
numpy>=2.1
fsspec>=2025.2.0
ujson
h5py
netCDF4
h5netcdf
xarray
pandas
fastparquet
virtualizarr
s3fs'
# icechunk 2.x ships wheels for Python 3.12 and later only.
icechunk_requirements='--only-binary=:all:
icechunk>=2.3,<2.4
zarr>=3.1,<3.2
numpy>=2.1
virtualizarr
obstore
h5py
netCDF4
xarray'
geo_requirements='--only-binary=:all:
zarr>=3.1,<3.2
numpy>=2.1
xarray
rioxarray
rasterio
pyproj
netCDF4'
ome_requirements='--only-binary=:all:
ome-zarr
zarr>=3.1,<3.2
numpy>=2.1
scikit-image
tifffile
dask'
notebook_requirements='--only-binary=:all:
nbclient
nbformat
ipykernel
numpy
mypy'
deploy_requirements='kubernetes-validate
PyYAML'
# numpy stays Debian's (osgeo is built against it): pip sees it through the system site
# packages and installs no other. The first line, a comment to pip, names the Debian
# packages the venv sees, so that the venv is made again when they change (a venv made
# before python3-numpy was installed would hold a numpy of its own, which osgeo cannot
# use).
views_requirements="# Debian: $(dpkg-query -W -f='${Package} ${Version} ' python3-gdal python3-numpy 2>/dev/null || true)
tifffile
SimpleITK
pynrrd"

# shellcheck source=scripts/test_cache.sh
. "$repo_root/scripts/test_cache.sh"

# build_venv PYTHON REQUIREMENTS FLAGS... DIR: a venv at DIR (with PYTHON and FLAGS) with
# REQUIREMENTS installed; pip retries what the network drops. pip compiles no bytecode
# (--no-compile): Python writes it for the modules the tests import as they first import
# them, instead of pip compiling every module of every package while the builds run.
build_venv() {
    local base=$1 requirements=$2
    local args=("${@:3}")
    local dir="${args[-1]}"
    unset 'args[-1]'
    "$base" -m venv ${args[@]+"${args[@]}"} "$dir"
    printf '%s\n' "$requirements" >"$dir/requirements.txt"
    local pip=("$dir/bin/python" -m pip install --quiet --disable-pip-version-check --retries 10 --no-compile)
    "${pip[@]}" --upgrade pip
    "${pip[@]}" -r "$dir/requirements.txt"
}

# make_venv NAME REQUIREMENTS [PYTHON VENV_FLAGS...]: target/NAME, a link to the test
# cache's venv of those requirements (made with PYTHON, default $python, and VENV_FLAGS).
make_venv() {
    local name="$1" requirements="$2"
    local base="${3:-$python}"
    local flags=("${@:4}")
    local key
    key=$(cache_key "$requirements" "$("$base" -VV)" "$(command -v "$base")" ${flags[@]+"${flags[@]}"})
    cache_link venv "$name-$key" "$target_dir/$name" \
        build_venv "$base" "$requirements" ${flags[@]+"${flags[@]}"}
    echo "setup_python: $name ready"
}

mkdir -p "$target_dir"
make_venv venv-zarr3 "$zarr3_requirements"
make_venv venv-zarr2 "$zarr2_requirements"
make_venv venv-views "$views_requirements" /usr/bin/python3 --system-site-packages
make_venv venv-refs "$refs_requirements"
make_venv venv-geo "$geo_requirements"
make_venv venv-ome "$ome_requirements"
make_venv venv-notebook "$notebook_requirements"
make_venv venv-deploy "$deploy_requirements"
# numpy's wheel for this Python, kept for the offline venvs of tests/it/python_api.rs.
download_numpy() {
    "$target_dir/venv-notebook/bin/python" -m pip download --quiet --disable-pip-version-check \
        --retries 10 --only-binary=:all: --dest "$1" numpy
}
cache_link wheelhouse "numpy-$(cache_key "$notebook_requirements" "$("$python" -VV)")" \
    "$target_dir/wheelhouse" download_numpy
# A Python 3.12 or later for venv-icechunk: $PYTHON312, one on PATH, or pyenv's.
python312() {
    local p
    for p in "${PYTHON312:-}" python3.13 python3.12 "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3; do
        if [ -n "$p" ] && "$p" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            command -v "$p"
            return 0
        fi
    done
    echo "setup_python: no Python 3.12 or later found (icechunk needs one; set PYTHON312)" >&2
    return 1
}
make_venv venv-icechunk "$icechunk_requirements" "$(python312)"
"$target_dir/venv-icechunk/bin/python" -c 'import icechunk, zarr, numpy; print("setup_python: icechunk", icechunk.__version__, "zarr", zarr.__version__, "numpy", numpy.__version__)'
for name in venv-zarr3 venv-zarr2; do
    "$target_dir/$name/bin/python" -c 'import zarr, numcodecs, numpy; print("setup_python:", "zarr", zarr.__version__, "numcodecs", numcodecs.__version__, "numpy", numpy.__version__)'
done
"$target_dir/venv-views/bin/python" -c 'from osgeo import gdal, gdal_array; import numpy, tifffile, SimpleITK, nrrd; print("setup_python: views: GDAL", gdal.__version__, "numpy", numpy.__version__, "tifffile", tifffile.__version__, "SimpleITK", SimpleITK.Version_VersionString(), "pynrrd", nrrd.__version__)'
"$target_dir/venv-refs/bin/python" -c 'import kerchunk, zarr, numcodecs, numpy, fsspec, h5py, netCDF4, xarray, h5netcdf, fastparquet, virtualizarr; print("setup_python: refs: kerchunk", kerchunk.__version__, "zarr", zarr.__version__, "numcodecs", numcodecs.__version__, "numpy", numpy.__version__, "fsspec", fsspec.__version__, "h5py", h5py.__version__, "HDF5", h5py.version.hdf5_version, "netCDF4", netCDF4.__version__, "netCDF-C", netCDF4.__netcdf4libversion__, "xarray", xarray.__version__, "h5netcdf", h5netcdf.__version__, "fastparquet", fastparquet.__version__, "virtualizarr", virtualizarr.__version__)'
"$target_dir/venv-geo/bin/python" -c 'import rasterio, rioxarray, xarray, zarr, pyproj, netCDF4; print("setup_python: geo: rasterio", rasterio.__version__, "GDAL", rasterio.__gdal_version__, "rioxarray", rioxarray.__version__, "xarray", xarray.__version__, "zarr", zarr.__version__, "PROJ", pyproj.proj_version_str)'
"$target_dir/venv-ome/bin/python" -c 'import ome_zarr, zarr, skimage, tifffile; print("setup_python: ome: ome-zarr", ome_zarr.__version__, "zarr", zarr.__version__, "scikit-image", skimage.__version__, "tifffile", tifffile.__version__)'
"$target_dir/venv-notebook/bin/python" -c 'import nbclient, ipykernel, numpy; print("setup_python: notebook: nbclient", nbclient.__version__, "ipykernel", ipykernel.__version__, "numpy", numpy.__version__)'
"$target_dir/venv-deploy/bin/python" -c 'import kubernetes_validate; print("setup_python: deploy: kubernetes-validate", kubernetes_validate.__version__, "schemas up to", kubernetes_validate.latest_version())'
