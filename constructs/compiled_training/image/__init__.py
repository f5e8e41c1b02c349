"""RuntimeImage: the runtime's image build on top of a DLC."""
