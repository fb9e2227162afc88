"""The memories the cortex tests store: one fact each, about unrelated things."""

MEMORIES = [
    "The user's dog is called Biscuit and loves the beach.",
    "Deployment uses the Kubernetes cluster in the Frankfurt region.",
    "Invoice XQ-7731 from Grue Supplies was paid on 3 March.",
    "The user prefers tea to coffee in the mornings.",
    "Our quarterly planning meeting moved to Thursday afternoons.",
    "The staging database password rotates every 30 days.",
]
