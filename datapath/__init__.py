"""What a case does with a datapath: send, expect against the model, judge, record."""
