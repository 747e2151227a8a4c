# Image of the ATSSS weight-control xApp for an O-RAN SC near-RT RIC.
# The RMR library (librmr_si.so) that ricxappframe loads at run time is added with the E2 path
# (issue 3); until then the image runs the standalone tools of the `atsss` command line.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /opt/atsss
COPY pyproject.toml README.md ./
COPY xapp ./xapp
COPY kpm ./kpm
COPY e2sim ./e2sim
COPY agent ./agent
COPY models ./models
RUN pip install . && useradd --system --uid 10001 atsss
USER atsss
ENTRYPOINT ["atsss"]
CMD ["demo"]
