"""A two-layer GCN in plain torch, in the style of Kipf & Welling's pygcn: a normalised
sparse-free adjacency, log_softmax outputs for every node, and the loss on the training
nodes only: F.nll_loss(output[idx_train], labels[idx_train])."""

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class GraphConvolution(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(in_features, out_features))
        self.bias = nn.Parameter(torch.zeros(out_features))
        nn.init.xavier_uniform_(self.weight)

    def forward(self, input, adj):
        support = torch.mm(input, self.weight)
        return torch.mm(adj, support) + self.bias


class GCN(nn.Module):
    def __init__(self, nfeat, nhid, nclass, dropout):
        super().__init__()
        self.gc1 = GraphConvolution(nfeat, nhid)
        self.gc2 = GraphConvolution(nhid, nclass)
        self.dropout = dropout

    def forward(self, x, adj):
        x = F.relu(self.gc1(x, adj))
        x = F.dropout(x, self.dropout, training=self.training)
        return F.log_softmax(self.gc2(x, adj), dim=1)


def load_data(n=120, nfeat=16, nclass=4):
    labels = torch.randint(0, nclass, (n,))
    features = torch.randn(n, nfeat) + F.one_hot(labels, nfeat).float() * 2
    same = labels[:, None] == labels[None, :]
    adj = ((torch.rand(n, n) < 0.05) | (same & (torch.rand(n, n) < 0.1))).float()
    adj = ((adj + adj.T) > 0).float() + torch.eye(n)
    deg = adj.sum(1)
    adj = adj / deg[:, None]
    return adj, features, labels, torch.arange(0, 40), torch.arange(40, 80)


torch.manual_seed(42)
adj, features, labels, idx_train, idx_val = load_data()
model = GCN(nfeat=features.shape[1], nhid=16, nclass=int(labels.max()) + 1, dropout=0.5)
optimizer = optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)


def train(epoch):
    model.train()
    optimizer.zero_grad()
    output = model(features, adj)
    loss_train = F.nll_loss(output[idx_train], labels[idx_train])
    loss_train.backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        output = model(features, adj)
        loss_val = F.nll_loss(output[idx_val], labels[idx_val])
    print(f"epoch {epoch}: train {loss_train.item():.4f} val {loss_val.item():.4f}")


for epoch in range(50):
    train(epoch)
