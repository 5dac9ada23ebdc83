"""What the pages call that never touches Streamlit: jobs in the background, launching, experiments, uploads, the environment probe and display tables."""
