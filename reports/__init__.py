"""A run's report: the pytest plugin that records it (results.json) and the pages made
from it (HTML), merged runs, build comparisons and coverage."""
