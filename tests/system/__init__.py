"""Real processes and whole systems: crashes, faults, hostile input, several processes on one
namespace and the scale-out topology; ``soak.py`` holds the long scenarios."""
