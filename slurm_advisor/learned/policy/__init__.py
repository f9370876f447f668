"""The placement network: its features and the actor-critic (see ``learned``; the policy that
runs it is ``policies.learned``, its training ``training``)."""
