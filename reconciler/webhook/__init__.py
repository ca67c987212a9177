"""Kueue's admission webhooks, served over HTTPS on every replica, and their certificates.

The rules are pure functions over decoded objects (``jobs``, ``clusterqueues``, ``localqueues``,
``flavors``, ``workloads``; field errors worded as Kubernetes words them in ``fielderrors``);
``handlers`` routes each webhook path to its rule; ``server`` serves AdmissionReview v1 over TLS
and reloads its certificate when the files change; ``certs`` makes a self-signed CA and serving
certificate, and ``certmanager`` keeps them in a Secret and injects the CA bundle into the webhook
configurations (Kueue's internalCertManagement).
"""
