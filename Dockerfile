# Image of the ATSSS weight-control xApp for an O-RAN SC near-RT RIC.
# Docker does not run on the development machine; tests/test_packaging.py lints this file
# (hadolint) and installs the wheel it builds into a fresh virtualenv with runtime dependencies
# only, then starts `atsss xapp serve` from it.

# RMR: ricxappframe loads librmr_si.so at run time. O-RAN SC publishes it as a Debian package
# (release 4.9.4, from the o-ran-sc/release repository on packagecloud), pinned here.
FROM python:3.11.10-slim-bookworm AS rmr
ARG RMR_VERSION=4.9.4
ADD https://packagecloud.io/o-ran-sc/release/packages/debian/stretch/rmr_${RMR_VERSION}_amd64.deb/download.deb /tmp/rmr.deb
RUN dpkg -i /tmp/rmr.deb && rm /tmp/rmr.deb

# Wheels of the xApp and its runtime dependencies: hiredis (pulled in by ricsdl) has no wheel
# for this Python and needs a compiler, and so does the fast E2 reader's C core; the compiler
# stays in this stage.
FROM python:3.11.10-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml setup.py README.md LICENSE NOTICE ./
COPY atsss ./atsss
COPY core ./core
COPY kpm ./kpm
COPY e2sim ./e2sim
COPY agent ./agent
COPY models ./models
COPY xapp ./xapp
COPY bench ./bench
RUN pip wheel --wheel-dir /wheels '.[xapp]'

FROM python:3.11.10-slim-bookworm
ARG VERSION=0.1.0
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    CONFIG_FILE=/opt/ric/config/config-file.json \
    XAPP_DESCRIPTOR_PATH=/opt/ric/config \
    RMR_SEED_RT=/opt/ric/config/router.txt \
    RMR_SRC_ID=service-ricxapp-atsss-xapp-rmr.ricxapp \
    ATSSS_CACHE_DIR=/opt/atsss/cache
COPY --from=rmr /usr/local/lib/librmr_si.so* /usr/local/lib/
COPY --from=build /wheels /wheels
RUN ldconfig \
    && pip install --no-index --find-links /wheels "atsss-xapp[xapp]==${VERSION}" \
    && rm -rf /wheels \
    && python -c "from kpm.codec import compile_all; compile_all()" \
    && python -c "import kpm.fast_message as f; assert f.COMPILED, 'no C core in the wheel'" \
    && useradd --system --uid 10001 --user-group --no-create-home atsss
# The descriptor is the configuration (its controls); a RIC mounts its own over it.
COPY xapp-descriptor.json /opt/ric/config/config-file.json
COPY deploy/router.txt /opt/ric/config/router.txt
USER 10001
EXPOSE 8080 4560 4561
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/ric/v1/health/alive', timeout=2)"]
ENTRYPOINT ["atsss"]
CMD ["xapp", "serve", "--e2", "ric"]
