# Image of the ATSSS weight-control xApp for an O-RAN SC near-RT RIC.
# Not built on the development machine (no Docker engine there); see docs/e2.md.

# RMR: ricxappframe loads librmr_si.so at run time. O-RAN SC publishes it as a Debian package.
FROM python:3.11-slim AS rmr
ARG RMR_VERSION=4.9.4
ADD https://packagecloud.io/o-ran-sc/release/packages/debian/stretch/rmr_${RMR_VERSION}_amd64.deb/download.deb /tmp/rmr.deb
RUN dpkg -i /tmp/rmr.deb

# Wheels: hiredis (pulled in by ricsdl) has no wheel for this Python and needs a compiler.
FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md ./
COPY atsss ./atsss
COPY core ./core
COPY kpm ./kpm
COPY e2sim ./e2sim
COPY agent ./agent
COPY models ./models
COPY xapp ./xapp
COPY bench ./bench
RUN pip wheel --wheel-dir /wheels '.[xapp]'

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
COPY --from=rmr /usr/local/lib/librmr_si.so* /usr/local/lib/
RUN ldconfig
COPY --from=build /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels && useradd --system --uid 10001 atsss
USER atsss
ENTRYPOINT ["atsss"]
CMD ["demo"]
