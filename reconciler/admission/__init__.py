"""Admission at the door, as pure rules: AdmissionReview decoding and verdicts, field errors
worded as Kubernetes words them, name checks, the queue-name rules every job kind shares, and
the route a webhook is declared by. The integrations declare their kinds' routes with these;
`reconciler.webhook` serves them.
"""
