"""The Python companion's build backend: setuptools' own
(setuptools.build_meta) with one check first. With
--no-build-isolation pip builds with whatever setuptools is installed;
before 70.1 setuptools builds a wheel only through the separate package
`wheel`, and without it fails with "invalid command 'bdist_wheel'",
which names nothing to install. This names it."""

from setuptools import build_meta as _st
from setuptools.build_meta import *  # noqa: F401,F403 - every hook as setuptools has it


def _need_wheel():
    import setuptools
    try:
        version = tuple(int(x) for x in setuptools.__version__.split(".")[:2])
    except ValueError:
        return
    if version >= (70, 1):
        return
    try:
        import wheel  # noqa: F401
    except ImportError:
        raise RuntimeError(
            "triton-bundle: setuptools %s builds a wheel only with the package 'wheel', which this Python lacks "
            "(setuptools 70.1 and later need none): install it (Debian: apt install python3-wheel; "
            "elsewhere: python3 -m pip install wheel), or drop --no-build-isolation --no-index so that pip "
            "fetches what the build needs" % setuptools.__version__) from None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _need_wheel()
    return _st.build_wheel(wheel_directory, config_settings, metadata_directory)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _need_wheel()
    return _st.build_editable(wheel_directory, config_settings, metadata_directory)


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _need_wheel()  # (setuptools before 70.1 writes the metadata through bdist_wheel too)
    return _st.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _need_wheel()
    return _st.prepare_metadata_for_build_editable(metadata_directory, config_settings)
