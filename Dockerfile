# retrieval-svc: the service (default) and the indexer (entrypoint retrieval-indexer).
FROM python:3.11-slim AS build
WORKDIR /src
RUN pip install --no-cache-dir build==1.2.2.post1
COPY pyproject.toml README.md ./
COPY retrieval_svc ./retrieval_svc
COPY indexer ./indexer
COPY mappings ./mappings
RUN python -m build --wheel --outdir /dist

FROM python:3.11-slim
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    RSVC_HOST=0.0.0.0 \
    RSVC_PORT=8080
# LibreOffice headless reads the old and Chinese office formats (.doc, .ppt, .rtf, .odt, WPS).
# Not pinned: Debian's security updates replace the version in place (the base image is the pin).
# hadolint ignore=DL3008
RUN apt-get update \
 && apt-get install -y --no-install-recommends libreoffice-core-nogui \
      libreoffice-writer-nogui libreoffice-calc-nogui libreoffice-impress-nogui \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 rsvc \
 && useradd --system --uid 10001 --gid rsvc --no-create-home --shell /usr/sbin/nologin rsvc
COPY --from=build /dist/ /tmp/dist/
RUN pip install --no-cache-dir /tmp/dist/*.whl && rm -rf /tmp/dist
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["retrieval-svc"]
CMD ["serve"]
